#!/usr/bin/env bash
set -e
"$1"
