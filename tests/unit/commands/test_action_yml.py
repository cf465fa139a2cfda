"""The GitHub Action's action.yml, read as text (PyYAML is no dependency of the project):
a composite whose shell steps call its one script, every input declared, passed and used.
The script run as the runner would is tests/e2e/test_action.py."""

from __future__ import annotations

import re

import pytest

from conftest import ROOT

ACTION = ROOT / "action.yml"
SCRIPT = ROOT / ".github" / "loaderprof-action.sh"
# Set by action.yml from something other than an input of the same name.
NOT_INPUTS = {"INPUT_DEFAULT_BRANCH": "github.event.repository.default_branch"}


def _section(text: str, key: str) -> str:
    """A top-level mapping's body: from `key:` to the next top-level key."""
    match = re.search(rf"^{key}:\n(.*?)(?=^\S|\Z)", text, re.M | re.S)
    assert match, f"action.yml has no top-level {key}:"
    return match.group(1)


def _steps(text: str) -> list[str]:
    body = _section(text, "runs")
    return [s for s in re.split(r"^    - ", body, flags=re.M)[1:] if s.strip()]


def _declared_inputs(text: str) -> set[str]:
    return set(re.findall(r"^  ([a-z][a-z0-9-]*):\s*$", _section(text, "inputs"), re.M))


def _env_name(inp: str) -> str:
    return "INPUT_" + inp.upper().replace("-", "_")


def test_action_yml_is_a_composite_whose_shell_steps_call_the_script() -> None:
    text = ACTION.read_text()
    assert re.search(r"^runs:\n  using: composite\s*$", text, re.M)
    steps = _steps(text)
    runs = [s for s in steps if re.search(r"^\s*run:", s, re.M)]
    assert len(runs) == 2
    for step in runs:
        run_line = re.search(r"^\s*run:(.*)$", step, re.M)
        assert run_line is not None
        assert run_line.group(1).strip() in (
            'bash "$GITHUB_ACTION_PATH/.github/loaderprof-action.sh" install',
            'bash "$GITHUB_ACTION_PATH/.github/loaderprof-action.sh" run',
        ), "every shell step is one call of the script: no logic in action.yml"
        assert re.search(r"^\s*shell: bash\s*$", step, re.M)
    uses = {m.group(1): s for s in steps if (m := re.search(r"uses: (\S+)", s))}
    assert set(uses) == {
        "actions/setup-python@v5",
        "actions/cache/restore@v4",
        "actions/upload-artifact@v4",
        "actions/cache/save@v4",
    }
    assert "if: github.event_name == 'pull_request'" in uses["actions/cache/restore@v4"]
    # A failing gate fails the compare step; the reports still upload, and the
    # baseline still saves (a default-branch run whose gates failed is still its baseline).
    assert "if: always()" in uses["actions/upload-artifact@v4"]
    assert (
        "if: always() && steps.compare.outputs.baseline-saved == 'true'"
        in uses["actions/cache/save@v4"]
    )
    assert "id: compare" in runs[1]
    # The same path both ways, and saved keys start with the prefix restore looks for.
    restore, save = uses["actions/cache/restore@v4"], uses["actions/cache/save@v4"]
    assert "path: ${{ inputs.baseline-path }}" in restore
    assert "path: ${{ inputs.baseline-path }}" in save
    assert "key: ${{ inputs.baseline-key }}-${{ runner.os }}-${{ github.sha }}-" in save
    assert "${{ inputs.baseline-key }}-${{ runner.os }}-\n" in restore


def test_every_input_is_declared_passed_and_used() -> None:
    text = ACTION.read_text()
    declared = _declared_inputs(text)
    assert {"dataset", "args", "gates", "python-version", "torch-spec", "baseline-key"} <= declared
    assert re.search(r"^  dataset:\n(?:    .*\n)*?    required: true$", text, re.M)
    # Every inputs.X that action.yml reads is declared, and every declared one is read.
    used = set(re.findall(r"inputs\.([a-z][a-z0-9-]*)", text))
    assert used == declared
    # What action.yml hands the script: INPUT_X from inputs.x (or a known context).
    passed = dict(re.findall(r"^\s+(INPUT_[A-Z_]+): \$\{\{ (.+?) \}\}\s*$", text, re.M))
    for name, expr in passed.items():
        if name in NOT_INPUTS:
            assert expr == NOT_INPUTS[name]
        else:
            assert re.match(rf"inputs\.{name[6:].lower().replace('_', '-')}\b", expr), name
    # Every INPUT_X the script reads is passed by action.yml.
    read = set(re.findall(r"\bINPUT_[A-Z_]+\b", SCRIPT.read_text()))
    assert read == set(passed), f"read, not passed: {read - set(passed)}"
    assert _env_name("loaderprof") in passed
    assert passed[_env_name("loaderprof")] == "inputs.loaderprof || github.action_path"


def test_parses_as_yaml_when_pyyaml_is_there() -> None:
    yaml = pytest.importorskip("yaml")
    action = yaml.safe_load(ACTION.read_text())
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    assert len(steps) == len(_steps(ACTION.read_text()))
    for step in steps:
        if "run" in step:
            assert "loaderprof-action.sh" in step["run"] and step["shell"] == "bash"
    assert set(action["inputs"]) == _declared_inputs(ACTION.read_text())
