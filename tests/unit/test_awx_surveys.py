"""The AWX surveys (playbooks/vars/awx_surveys.yml) against the roles' argument_specs.

Every variable a job template's survey asks must be read by a role that template runs: either as
the role option itself (ddp_benchmark_steps) or as the cluster-wide ddp_* variable a role option
defaults from (preflight_torch_version defaults from ddp_torch_version). The survey type must suit
the option's type, and the offered choices must be values the option accepts: its own choices, or
the compatibility matrix's values for version variables, or preflight's rule for processes per node.

The vars file holds Jinja (choices read from data/compat_matrix.yml); it is rendered by Ansible
itself, exactly as playbooks/awx_setup.yml sees it.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.ddp.cluster.plugins.module_utils.cluster.preflight import inventory_problems

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOKS = os.path.join(ROOT, "playbooks")
SURVEYS = os.path.join(PLAYBOOKS, "vars", "awx_surveys.yml")
ANSIBLE_BIN = os.path.join(os.path.dirname(sys.executable), "ansible")

# Survey question type -> argument_spec types it can feed (AWX sends text and choices as strings,
# integer as an int).
COMPATIBLE_TYPES = {
    "integer": {"int", "float", "raw"},
    "float": {"float", "raw"},
    "text": {"str", "raw", "path"},
    "textarea": {"str", "raw"},
    "password": {"str", "raw"},
    "multiplechoice": {"str", "raw"},
    "multiselect": {"list"},
}
SURVEY_FIELDS = {"question_name", "question_description", "variable", "type", "choices", "default",
                 "required", "min", "max", "new_question"}


def load_yaml(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def role_options():
    """role -> {option name: option spec}, over every entry point of the role."""
    options = {}
    roles_dir = os.path.join(ROOT, "roles")
    for role in sorted(os.listdir(roles_dir)):
        path = os.path.join(roles_dir, role, "meta", "argument_specs.yml")
        if not os.path.exists(path):
            continue
        for entry in (load_yaml(path) or {}).get("argument_specs", {}).values():
            options.setdefault(role, {}).update(entry.get("options") or {})
    return options


def matrix_domains():
    """Values a version variable may take, from data/compat_matrix.yml (options without choices)."""
    matrix = load_yaml(os.path.join(ROOT, "data", "compat_matrix.yml"))
    releases = matrix["torch_releases"]
    return {
        "ddp_torch_version": {r["torch"] for r in releases},
        "ddp_torchvision_version": {r["torchvision"] for r in releases},
        "ddp_cuda_version": {"auto"} | {c for r in releases for c in r["cuda"]},
    }


def _nproc_ok(value):
    """preflight's own rule (module_utils/cluster/preflight.py): 'auto' or an integer >= 1."""
    problems = inventory_problems({"nodes": ["n1"], "head_hosts": ["n1"], "nproc_per_node": value})
    return not [p for p in problems if p["code"] == "PREFLIGHT_BAD_NPROC"]


# Options without their own choices whose values are checked by a rule instead of a matrix set.
VALUE_RULES = {"ddp_nproc_per_node": _nproc_ok}


def readers(variable, roles, options):
    """(role, option, spec) for every option of these roles that is, or defaults from, variable."""
    found = []
    pattern = re.compile(r"\b%s\b" % re.escape(variable))
    for role in roles:
        for name, spec in options.get(role, {}).items():
            if name == variable or pattern.search(str(spec.get("default", ""))):
                found.append((role, name, spec))
    return found


def question_problems(question, roles, options, domains):
    """Everything wrong with one survey question for a template that runs these roles."""
    problems = []
    variable = question.get("variable")
    qtype = question.get("type")
    unknown = set(question) - SURVEY_FIELDS
    if unknown:
        problems.append("%s: fields AWX does not know: %s" % (variable, sorted(unknown)))
    if qtype not in COMPATIBLE_TYPES:
        return problems + ["%s: unknown survey type %r" % (variable, qtype)]
    found = readers(variable, roles, options)
    if not found:
        return problems + ["%s: no role of %s reads it (no option of that name or defaulting from it)"
                           % (variable, sorted(roles))]
    choices = question.get("choices")
    default = question.get("default")
    if qtype == "multiplechoice":
        if not isinstance(choices, list) or not choices:
            problems.append("%s: multiplechoice without a list of choices" % variable)
            choices = []
        elif question.get("required") and default not in choices:
            problems.append("%s: default %r is not one of the choices" % (variable, default))
    if qtype == "integer":
        if not isinstance(default, int) or isinstance(default, bool):
            problems.append("%s: integer question with default %r" % (variable, default))
        elif not question.get("min", default) <= default <= question.get("max", default):
            problems.append("%s: default %r outside min/max" % (variable, default))
    if qtype in ("text", "textarea", "password") and not isinstance(default, str):
        problems.append("%s: %s question with a non-string default %r" % (variable, qtype, default))

    for role, option, spec in found:
        where = "%s (%s.%s, type %s)" % (variable, role, option, spec.get("type", "str"))
        if spec.get("type", "str") not in COMPATIBLE_TYPES[qtype]:
            problems.append("%s: a %s survey question cannot feed it" % (where, qtype))
        if qtype != "multiplechoice":
            continue
        if spec.get("choices"):
            allowed = {str(c) for c in spec["choices"]}
            extra = [c for c in choices if str(c) not in allowed]
            if extra:
                problems.append("%s: choices %s not in the option's choices %s" % (where, extra, sorted(allowed)))
        elif variable in domains:
            extra = [c for c in choices if c not in domains[variable]]
            if extra:
                problems.append("%s: choices %s not in data/compat_matrix.yml" % (where, extra))
        elif variable in VALUE_RULES:
            extra = [c for c in choices if not VALUE_RULES[variable](c)]
            if extra:
                problems.append("%s: choices %s refused by the role" % (where, extra))
        else:
            problems.append("%s: nothing to check the choices %s against" % (where, choices))
    return problems


def playbook_roles(path, seen=None):
    """ddp.cluster roles a playbook runs, following import_playbook."""
    seen = set() if seen is None else seen
    if path in seen:
        return set()
    seen.add(path)
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    roles = set(re.findall(r"\bddp\.cluster\.(\w+)\b", text))
    for play in yaml.safe_load(text) or []:
        target = play.get("ansible.builtin.import_playbook") or play.get("import_playbook")
        if target:
            roles |= playbook_roles(os.path.normpath(os.path.join(os.path.dirname(path), target)), seen)
    return roles


def stage_playbooks():
    """Playbooks that playbooks/site.yml imports, in order."""
    return ["playbooks/" + play["ansible.builtin.import_playbook"]
            for play in load_yaml(os.path.join(PLAYBOOKS, "site.yml"))]


@pytest.fixture(scope="module")
def surveys(tmp_path_factory):
    """The vars file rendered by Ansible (outside the repo, so its ansible.cfg is not read)."""
    expr = ("{{ {'questions': ddp_awx_survey_questions, 'stages': ddp_awx_stage_templates,"
            " 'site': ddp_awx_site_template, 'workflow': ddp_awx_workflow_survey} }}")
    env = dict(os.environ, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
               ANSIBLE_NOCOLOR="1")
    env.pop("ANSIBLE_CONFIG", None)
    proc = subprocess.run(
        [ANSIBLE_BIN, "localhost", "-i", "localhost,", "-c", "local", "--playbook-dir", PLAYBOOKS,
         "-e", "@" + SURVEYS, "-m", "ansible.builtin.debug", "-a", "msg=" + expr],
        cwd=str(tmp_path_factory.mktemp("render")), env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["msg"]


@pytest.fixture(scope="module")
def options():
    return role_options()


def templates_of(surveys):
    """(name, roles it runs, survey variables) for every job template and the workflow."""
    out = []
    for tpl in surveys["stages"] + [surveys["site"]]:
        out.append((tpl["stage"], playbook_roles(os.path.join(ROOT, tpl["playbook"])), tpl["survey"]))
    every = set()
    for tpl in surveys["stages"]:
        every |= playbook_roles(os.path.join(ROOT, tpl["playbook"]))
    out.append(("workflow", every, surveys["workflow"]))
    return out


def test_every_survey_variable_matches_the_roles_that_read_it(surveys, options):
    domains = matrix_domains()
    problems = []
    for name, roles, variables in templates_of(surveys):
        for variable in variables:
            question = surveys["questions"].get(variable)
            if question is None:
                problems.append("%s: %s has no question in ddp_awx_survey_questions" % (name, variable))
                continue
            if question.get("variable") != variable:
                problems.append("%s: question keyed %s sets %s" % (name, variable, question.get("variable")))
            problems += ["%s: %s" % (name, p) for p in question_problems(question, roles, options, domains)]
    assert not problems, "\n".join(problems)


def test_every_question_is_asked_somewhere(surveys):
    asked = set(surveys["workflow"]) | set(surveys["site"]["survey"])
    assert set(surveys["questions"]) == asked


def test_version_choices_are_the_matrix(surveys):
    matrix = load_yaml(os.path.join(ROOT, "data", "compat_matrix.yml"))
    torch = surveys["questions"]["ddp_torch_version"]
    assert set(torch["choices"]) == {r["torch"] for r in matrix["torch_releases"]}
    assert torch["default"] == matrix["default_torch"]
    cuda = surveys["questions"]["ddp_cuda_version"]["choices"]
    assert set(cuda) == matrix_domains()["ddp_cuda_version"]


def test_one_job_template_per_stage_in_site_order(surveys):
    assert [t["playbook"] for t in surveys["stages"]] == stage_playbooks()
    assert surveys["site"]["playbook"] == "site.yml"
    for tpl in surveys["stages"] + [surveys["site"]]:
        assert os.path.isfile(os.path.join(ROOT, tpl["playbook"])), tpl["playbook"]


def test_nothing_prompts():
    with open(os.path.join(PLAYBOOKS, "awx_setup.yml"), encoding="utf-8") as handle:
        setup = handle.read()
    assert not re.search(r"^\s*ask_\w+_on_launch\s*:", setup, re.M)
    for path in [os.path.join(ROOT, "site.yml")] + [os.path.join(PLAYBOOKS, f) for f in os.listdir(PLAYBOOKS)
                                                    if f.endswith(".yml")]:
        for play in load_yaml(path) or []:
            assert "vars_prompt" not in play, path
            assert "pause" not in json.dumps(play.get("tasks", [])).replace("ansible.builtin.", ""), path


# Deliberately wrong rows: each must be caught, so the check above cannot pass vacuously.
WRONG_ROWS = [
    ({"variable": "ddp_torch_version", "type": "multiplechoice", "choices": ["9.9.9"], "default": "9.9.9",
      "required": True}, "not in data/compat_matrix.yml"),
    ({"variable": "ddp_benchmark_model", "type": "integer", "default": 1, "min": 0, "max": 2, "required": True},
     "cannot feed it"),
    ({"variable": "ddp_bench_steps", "type": "integer", "default": 5, "required": True}, "no role of"),
    ({"variable": "ddp_benchmark_backend", "type": "multiplechoice", "choices": ["auto", "mpi"], "default": "auto",
      "required": True}, "not in the option's choices"),
    ({"variable": "ddp_nproc_per_node", "type": "multiplechoice", "choices": ["auto", "0"], "default": "auto",
      "required": True}, "refused by the role"),
    ({"variable": "ddp_cuda_version", "type": "multiplechoice", "choices": ["12.1", "cpu"], "default": "11.0",
      "required": True}, "default '11.0' is not one of the choices"),
    ({"variable": "ddp_benchmark_steps", "type": "integer", "default": "50", "required": True},
     "integer question with default"),
]


@pytest.mark.parametrize("row,expected", WRONG_ROWS, ids=[r[0]["variable"] + "-" + r[1] for r in WRONG_ROWS])
def test_a_wrong_row_is_caught(row, expected, options):
    roles = {"preflight", "pytorch_env", "ddp_benchmark"}
    problems = question_problems(row, roles, options, matrix_domains())
    assert any(expected in p for p in problems), problems


def test_a_variable_read_by_no_role_of_the_template_is_caught(options):
    row = {"variable": "ddp_torch_version", "type": "multiplechoice", "choices": ["2.1.0"], "default": "2.1.0",
           "required": True}
    problems = question_problems(row, {"firewall", "ssh_trust"}, options, matrix_domains())
    assert any("no role of" in p for p in problems), problems
