#!/usr/bin/env python3
"""Marks a SPIR-V module's loads from chosen descriptor bindings Nontemporal.

A shader-development tool for A/B runs through VKMOE_SHADER_DIR: streamed
weights or caches loaded with the Nontemporal memory operand (SPIR-V 1.4+)
may leave the GPU's L2 to data that is reused. Reads a module from a .spv
file or a build's .spv.h (comma-separated words), writes a .spv.

usage: spirv_nontemporal.py IN OUT BINDING...   (prints the loads it marked)
"""
import re
import struct
import sys

OP_DECORATE, OP_LOAD = 71, 61
ACCESS_CHAINS = {65, 66, 67, 70}  # OpAccessChain, InBounds, Ptr, InBoundsPtr
DECORATION_BINDING = 33
NONTEMPORAL = 0x4


def read_words(path):
    data = open(path, "rb").read()
    if path.endswith(".h"):
        return [int(w, 16) for w in re.findall(r"0x[0-9a-fA-F]{8}", data.decode())]
    return list(struct.unpack("<%dI" % (len(data) // 4), data))


def instructions(words):
    i = 5
    while i < len(words):
        n, op = words[i] >> 16, words[i] & 0xFFFF
        if n == 0:
            raise ValueError("zero-length instruction at word %d" % i)
        yield i, n, op
        i += n


def mark(words, bindings):
    if words[0] != 0x07230203 or words[1] < 0x00010400:
        raise ValueError("not a SPIR-V 1.4+ module")
    # The variables with those bindings, then every pointer chained from them.
    pointers = {words[i + 1] for i, n, op in instructions(words)
                if op == OP_DECORATE and words[i + 2] == DECORATION_BINDING and words[i + 3] in bindings}
    out, marked = words[:5], 0
    for i, n, op in instructions(words):
        ins = words[i:i + n]
        if op in ACCESS_CHAINS and ins[3] in pointers:
            pointers.add(ins[2])
        elif op == OP_LOAD and ins[3] in pointers:
            if n > 4:
                ins[4] |= NONTEMPORAL
            else:
                ins = [((n + 1) << 16) | op] + ins[1:] + [NONTEMPORAL]
            marked += 1
        out += ins
    return out, marked


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    words, marked = mark(read_words(sys.argv[1]), {int(b) for b in sys.argv[3:]})
    open(sys.argv[2], "wb").write(struct.pack("<%dI" % len(words), *words))
    print("%s: %d loads marked" % (sys.argv[2], marked))


if __name__ == "__main__":
    main()
