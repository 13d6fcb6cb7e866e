#!/usr/bin/env bash
# Build the ddp.cluster docs site (`make docs`): antsibull-docs writes the RST of every module, filter and
# role (from meta/argument_specs.yml) of the collection as ansible-doc sees it from this clone, the guides
# (docs/*.md) are added as they are, and Sphinx renders the HTML with warnings as errors.
#   docs/site/build.sh [OUTPUT_DIR]      default: artifacts/docs; the site is OUTPUT_DIR/html/index.html
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$(mkdir -p "${1:-$root/artifacts/docs}" && cd "${1:-$root/artifacts/docs}" && pwd)
bin=$(dirname "$(command -v antsibull-docs)")
cd "$root"  # ansible.cfg here makes ddp.cluster resolve to this clone (collections/ symlink)

# Markup, schema and cross-reference errors in the plugin and role docs fail the build.
"$bin/antsibull-docs" lint-collection-docs --plugin-docs --skip-rstcheck .

src="$out/rst"
rm -rf "$src" "$out/html" "$out/doctrees"
mkdir -p "$src"
chmod og-w "$src"  # antsibull-docs wants its output folder writable only by its owner
"$bin/antsibull-docs" --config-file "$here/antsibull-docs.cfg" collection \
  --use-current --fail-on-error --cleanup everything --dest-dir "$src" ddp.cluster
cp "$here/index.rst" "$here/ansible_links.rst" "$src/"
mkdir -p "$src/guides"
cp docs/architecture.md docs/cases.md docs/troubleshooting.md docs/awx.md docs/offline.md docs/scale.md "$src/guides/"
"$bin/sphinx-build" -q -b html -c "$here" -d "$out/doctrees" -W --keep-going "$src" "$out/html"
echo "docs: $out/html/index.html"
