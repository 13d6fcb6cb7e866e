# Sphinx configuration of the ddp.cluster docs site, built by docs/site/build.sh (`make docs`).
# The plugin and role pages come from antsibull-docs; the guides are the Markdown files of docs/.
# No intersphinx: the site builds offline, and links to docs.ansible.com are written out.
from __future__ import annotations

project = "ddp.cluster"
copyright = "ddp.cluster contributors"
title = "ddp.cluster"
html_short_title = "ddp.cluster"

extensions = ["sphinx_antsibull_ext", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
myst_heading_anchors = 3

pygments_style = "ansible"
highlight_language = "YAML+Jinja"

html_theme = "sphinx_ansible_theme"
html_show_sphinx = False
display_version = False
html_use_smartypants = True
html_use_modindex = False
html_use_index = False
html_copy_source = False
html_theme_options = {
    "collapse_navigation": False,
    "navigation_depth": 3,
    # The theme's defaults point the top bar and the logo at Ansible's own site: point them at ours.
    "topbar_links": {
        "Repository": "https://github.com/ddp-cluster/ddp.cluster",
        "Issues": "https://github.com/ddp-cluster/ddp.cluster/issues",
    },
    "documentation_home_url": "https://github.com/ddp-cluster/ddp.cluster",
}

default_role = "any"
nitpicky = True
