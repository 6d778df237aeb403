#!/usr/bin/env bash
# Creates (or refreshes) a local Julia package registry that lists CuMem, so that
# `] add CuMem` works by name, offline.
#
# Usage: scripts/make-registry.sh DIR [REPO_URL]
#
#   DIR       the registry to create: a git repository holding Registry.toml and
#             C/CuMem/{Package,Versions,Deps,Compat}.toml
#   REPO_URL  where Pkg should clone CuMem from (a path or a git URL); default: this
#             checkout's top directory
#
# The registered version is Project.toml's `version` as committed at HEAD, with the
# git-tree-sha1 of HEAD's tree (`git rev-parse HEAD^{tree}`): Pkg installs exactly that
# tree, so uncommitted changes are not part of it. Run it again after committing to
# register the new HEAD (same version number: the entry is replaced).
#
# Use the registry either way:
#   julia> import Pkg; Pkg.Registry.add(Pkg.RegistrySpec(path = "DIR"))
#   or copy/clone DIR into <depot>/registries/CuMemRegistry
# then: julia> Pkg.add("CuMem")
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi

dir=$1
src=$(git -C "$(dirname -- "$0")/.." rev-parse --show-toplevel)
url=${2:-$src}

# Fixed identity of the registry, so that re-running replaces it in a depot.
reg_name=CuMemRegistry
reg_uuid=7a5d8b9e-2c4f-4e61-9d3a-c0e1f2a3b4c5

project=$(git -C "$src" show HEAD:Project.toml) || {
    echo "make-registry.sh: Project.toml is not committed at HEAD of $src" >&2
    exit 1
}
tree=$(git -C "$src" rev-parse 'HEAD^{tree}')

# Reads `key = "value"` from the top of Project.toml (before the first [section]).
top_value() {
    printf '%s\n' "$project" | awk -v k="$1" '
        /^\[/ { exit }
        $1 == k { sub(/^[^=]*= *"/, ""); sub(/".*$/, ""); print; exit }'
}
# Prints the `key = value` lines of one [section].
section() {
    printf '%s\n' "$project" | awk -v s="[$1]" '
        /^\[/ { on = ($0 == s); next }
        on && /=/ { print }'
}

name=$(top_value name)
uuid=$(top_value uuid)
version=$(top_value version)
if [ -z "$name" ] || [ -z "$uuid" ] || [ -z "$version" ]; then
    echo "make-registry.sh: Project.toml at HEAD needs name, uuid and version" >&2
    exit 1
fi
major_minor=$(printf '%s' "$version" | cut -d. -f1,2)

# [compat] entries are caret specifiers ("1.5" = [1.5.0, 2)); registries store ranges.
compat_range() {
    local spec=${1#^}
    spec=${spec%%,*}
    spec=$(printf '%s' "$spec" | tr -d ' ')
    local a b c
    IFS=. read -r a b c <<<"$spec"
    b=${b:-0}
    c=${c:-0}
    if [ "$a" != "0" ]; then
        echo "$a.$b.$c-$a"
    elif [ "$b" != "0" ]; then
        echo "0.$b.$c-0.$b"
    else
        echo "0.0.$c"
    fi
}

mkdir -p "$dir/C/$name"
dir=$(cd "$dir" && pwd)
pkgdir="$dir/C/$name"

cat >"$dir/Registry.toml" <<EOF
name = "$reg_name"
uuid = "$reg_uuid"
repo = "$dir"
description = "Local registry of the CuMem package (made by scripts/make-registry.sh)"

[packages]
$uuid = { name = "$name", path = "C/$name" }
EOF

cat >"$pkgdir/Package.toml" <<EOF
name = "$name"
uuid = "$uuid"
repo = "$url"
EOF

cat >"$pkgdir/Versions.toml" <<EOF
["$version"]
git-tree-sha1 = "$tree"
EOF

{
    echo "[\"$major_minor\"]"
    section deps | sed 's/^ *//'
} >"$pkgdir/Deps.toml"

{
    echo "[\"$major_minor\"]"
    section compat | while IFS= read -r line; do
        key=$(printf '%s' "$line" | sed 's/ *=.*//; s/^ *//')
        val=$(printf '%s' "$line" | sed 's/^[^=]*= *"//; s/".*//')
        echo "$key = \"$(compat_range "$val")\""
    done
} >"$pkgdir/Compat.toml"

# A registry is a git repository (Pkg.Registry.add clones it).
git_id=(-c user.name="CuMem make-registry" -c user.email="cumem@localhost" -c commit.gpgsign=false)
if [ ! -d "$dir/.git" ]; then
    git -C "$dir" init -q
fi
git -C "$dir" add -A
if ! git -C "$dir" diff --cached --quiet; then
    git "${git_id[@]}" -C "$dir" commit -q -m "CuMem $version at tree $tree"
fi

echo "registry $reg_name at $dir: $name $version, tree $tree, repo $url"
