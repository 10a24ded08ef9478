#!/usr/bin/env bash
# Builds the release `haul` into .build/release/haul (or under `--scratch-path DIR`, passed on to
# `swift build` with any other argument): the Swift runtime and Foundation linked in, so the
# binary runs on a machine without Swift, and every module compiled to reach the metadata of
# its generic types through accessor functions rather than by mangled name. A name is resolved
# at run time, and the first time a process meets each generic type that way the runtime reads
# every protocol conformance record of the binary (11,000 of them) to check the type's
# requirements: a quarter of the CPU of a one-file `haul get` or `haul put` (BENCHMARKS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
exec swift build -c release --static-swift-stdlib --product haul \
    -Xswiftc -Xfrontend -Xswiftc -disable-concrete-type-metadata-mangled-name-accessors "$@"
