#!/usr/bin/env bash
# Run complextorch's own tests of its positional encodings, attention, Transformer and ViT
# against the drop-in complexformer.compat.complextorch.
#
# The four test files of complextorch 2.1.1 (J. W. Smith, complextorch: a lightweight
# complex-valued neural network package built on PyTorch):
#   tests/nn/modules/test_position.py
#   tests/nn/modules/attention/test_attention.py
#   tests/nn/modules/test_transformer.py
#   tests/models/test_vit.py
# (with tests/conftest.py, which seeds the random generators) are copied to a temporary folder,
# their import lines are rewritten from `complextorch` to `complexformer.compat.complextorch`
# (nothing else changes), and pytest runs them. See docs/complex_layers.md, "Porting from
# complextorch".
#
# Usage:
#   scripts/complextorch-own-tests.sh [--against-complextorch] [CHECKOUT] [PYTEST_ARGS...]
#
#   CHECKOUT  a complextorch source checkout (its tests/ folder is read). Without it the script
#             clones the release tag with `git clone --depth 1`, which NEEDS THE NETWORK.
#             complextorch tags its releases with the bare version (2.0.0, 2.0.1, ...), so the
#             tag tried first is 2.1.1, then v2.1.1; COMPLEXTORCH_TAG=... picks another.
#   --against-complextorch
#             run the copies unchanged, against the installed complextorch (the reference).
#   PYTHON    the interpreter (default: the repository's .venv/bin/python, else python3).
#
# Measured (complextorch 2.1.1 installed, its test files of that release): 49 of 49 pass
# against complextorch and 49 of 49 against complexformer.compat.complextorch.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-}
if [[ -z $PYTHON ]]; then
    if [[ -x $ROOT/.venv/bin/python ]]; then PYTHON=$ROOT/.venv/bin/python; else PYTHON=python3; fi
fi
TAG=${COMPLEXTORCH_TAG:-2.1.1}
REPO_URL=https://github.com/josiahwsmith10/complextorch
FILES=(
    tests/nn/modules/test_position.py
    tests/nn/modules/attention/test_attention.py
    tests/nn/modules/test_transformer.py
    tests/models/test_vit.py
)

rewrite=1
if [[ ${1:-} == --against-complextorch ]]; then
    rewrite=0
    shift
fi
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/complextorch-own-tests.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

if [[ $# -ge 1 && -d $1 ]]; then
    SRC=$(cd "$1" && pwd)
    shift
else
    echo "no complextorch checkout given: cloning $REPO_URL at tag $TAG (needs the network)" >&2
    if ! git clone --quiet --depth 1 --branch "$TAG" "$REPO_URL" "$WORK/src" 2>/dev/null; then
        echo "cloning tag $TAG failed (no such tag, or no network); trying v$TAG" >&2
        git clone --quiet --depth 1 --branch "v$TAG" "$REPO_URL" "$WORK/src"
    fi
    SRC=$WORK/src
fi

for f in "${FILES[@]}" tests/conftest.py; do
    if [[ -f $SRC/$f ]]; then
        mkdir -p "$WORK/run/$(dirname "$f")"
        cp "$SRC/$f" "$WORK/run/$f"
    elif [[ $f != tests/conftest.py ]]; then
        echo "missing $SRC/$f: is $SRC a complextorch checkout?" >&2
        exit 2
    fi
done

if [[ $rewrite == 1 ]]; then
    # only the import lines: `from complextorch...` / `import complextorch...`, also indented
    find "$WORK/run" -name '*.py' -exec sed -E -i \
        '/^[[:space:]]*(from|import)[[:space:]]+complextorch([.[:space:]]|$)/ s/complextorch/complexformer.compat.complextorch/' \
        {} +
    echo "rewritten import lines:" >&2
    grep -rhn --include='*.py' -E '^[[:space:]]*(from|import)[[:space:]]+complex' "$WORK/run" >&2 || true
    target="complexformer.compat.complextorch"
else
    target="complextorch $("$PYTHON" -c 'import complextorch; print(complextorch.__version__)')"
fi

printf '[pytest]\n' >"$WORK/run/pytest.ini"  # keep the repository's pytest settings out
echo "running complextorch's own tests against $target" >&2
cd "$WORK/run"
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m pytest -q -p no:cacheprovider \
    -c "$WORK/run/pytest.ini" --rootdir "$WORK/run" "$@" tests
