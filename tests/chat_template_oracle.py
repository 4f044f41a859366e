#!/usr/bin/env python3
"""Reference renderer for tests/test_chat_template.cpp: Python's jinja2 set up as
transformers' apply_chat_template sets it up.

Usage: chat_template_oracle.py REQUEST.json  (prints the response JSON on stdout)
REQUEST: {"now": "YYYY-MM-DDTHH:MM:SS", "templates": [path, ...], "cases": [ctx, ...]}
RESPONSE: {"results": [[{"out": str} | {"error": str}, ...per case], ...per template]}
Exit status 3 when jinja2 is missing.
"""
import json
import sys
from datetime import datetime

try:
    import jinja2
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("jinja2 is not installed", file=sys.stderr)
    sys.exit(3)


class GenerationTag(Extension):
    """transformers' {% generation %}...{% endgeneration %}: renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def make_env(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return now.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        req = json.load(f)
    env = make_env(datetime.fromisoformat(req["now"]))
    results = []
    for path in req["templates"]:
        with open(path, encoding="utf-8") as f:
            source = f.read()
        try:
            template = env.from_string(source)
        except Exception as e:  # noqa: BLE001 - every failure is a result
            results.append([{"error": f"{type(e).__name__}: {e}"}] * len(req["cases"]))
            continue
        row = []
        for ctx in req["cases"]:
            try:
                row.append({"out": template.render(**ctx)})
            except Exception as e:  # noqa: BLE001
                row.append({"error": f"{type(e).__name__}: {e}"})
        results.append(row)
    json.dump({"results": results}, sys.stdout, ensure_ascii=True)


if __name__ == "__main__":
    main()
