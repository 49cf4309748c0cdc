"""The ACP registry entry (`registry/trio-acp/`): what the registry's build checks of it.

The registry (agentclientprotocol/registry) keeps one folder per agent, named by its id,
with `agent.json` and `icon.svg`.  Its build validates `agent.json` against
`agent.schema.json` (vendored here, `registry/agent.schema.json`; source and licence in
`registry/README.md`), wants the distribution's pinned version to be the entry's version,
and an icon that is a 16×16 square drawn in `currentColor` only (clients theme it).  The
checks below are the same rules, written for this repository; each is also shown to
catch what it is about on a broken copy.
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = ROOT / "registry"
ENTRY = REGISTRY / "trio-acp"
SVG_NS = "{http://www.w3.org/2000/svg}"

#: The values the registry allows for a fill or a stroke: anything else is a fixed colour.
THEMABLE = {"currentcolor", "none", "inherit"}
#: Presentation attributes and style properties that paint with a colour.
PAINT = ("fill", "stroke", "color", "stop-color", "flood-color", "lighting-color")


def pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["project"]


def manifest() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ENTRY / "agent.json").read_text(encoding="utf-8"))
    return data


def manifest_problems(entry: dict[str, Any], folder: str, project: dict[str, Any]) -> list[str]:
    """What the registry's build (and a user's `uvx`) would refuse in `entry`."""
    schema = json.loads((REGISTRY / "agent.schema.json").read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())
    problems = [
        f"schema: {'.'.join(map(str, e.absolute_path)) or 'root'}: {e.message}"
        for e in validator.iter_errors(entry)
    ]
    if problems:
        return problems
    if entry["id"] != folder:
        problems.append(f"id {entry['id']!r} is not the folder's name {folder!r}")
    if entry["version"] != project["version"]:
        problems.append(f"version {entry['version']} is not pyproject's {project['version']}")
    uvx = entry["distribution"].get("uvx")
    if uvx is None:
        problems.append("no uvx distribution")
        return problems
    # Pinned exactly (the registry rejects @latest and a pin other than the entry's version):
    # a release of the entry installs that release, not whatever is newest.
    pin = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)", uvx["package"])
    if pin is None:
        problems.append(f"uvx package {uvx['package']!r} is not pinned as NAME==VERSION")
        return problems
    name, version = pin.groups()
    if name != project["name"]:
        problems.append(f"uvx package {name!r} is not this project ({project['name']!r})")
    if version != entry["version"]:
        problems.append(f"uvx pins {version}, the entry is {entry['version']}")
    # `uvx NAME==V ARGS` runs the command called NAME from that package.
    if name not in project.get("scripts", {}):
        problems.append(f"the package has no {name!r} command for uvx to run")
    return problems


def _length(value: str | None) -> float | None:
    m = re.fullmatch(r"\s*([0-9.]+)\s*(px)?\s*", value or "")
    return float(m.group(1)) if m else None


def icon_problems(svg: str) -> list[str]:
    """What the registry refuses in an icon: not 16×16 and square, or a fixed colour."""
    try:
        root = ET.fromstring(svg)
    except ET.ParseError as exc:
        return [f"not XML: {exc}"]
    if root.tag != f"{SVG_NS}svg":
        return [f"the root element is {root.tag}, not svg"]
    problems = []
    box = (root.get("viewBox") or "").replace(",", " ").split()
    size = (_length(root.get("width")), _length(root.get("height")))
    if size == (None, None) and len(box) == 4:
        size = (float(box[2]), float(box[3]))
    if size != (16.0, 16.0):
        problems.append(f"size {size}, not 16×16")
    if len(box) == 4 and (float(box[2]), float(box[3])) != (16.0, 16.0):
        problems.append(f"viewBox {root.get('viewBox')}, not 16×16")
    uses_current = False
    for element in root.iter():
        paints = {k: v for k, v in element.attrib.items() if k in PAINT}
        for declaration in (element.get("style") or "").split(";"):
            key, _, value = declaration.partition(":")
            if key.strip() in PAINT:
                paints[key.strip()] = value
        for key, value in paints.items():
            normalized = value.strip().lower()
            uses_current |= normalized == "currentcolor"
            if key in ("fill", "stroke") and normalized not in THEMABLE:
                problems.append(f"{element.tag.removeprefix(SVG_NS)} {key}={value!r}")
            elif key not in ("fill", "stroke") and normalized != "currentcolor":
                problems.append(f"{element.tag.removeprefix(SVG_NS)} {key}={value!r}")
        if element.tag in (f"{SVG_NS}image", f"{SVG_NS}foreignObject"):
            problems.append(f"{element.tag.removeprefix(SVG_NS)}: not a monochrome drawing")
    if not uses_current:
        problems.append("no currentColor: the icon would be black in every theme")
    return problems


# --- the entry ------------------------------------------------------------------------


def test_manifest_is_a_valid_registry_entry():
    assert manifest_problems(manifest(), ENTRY.name, pyproject()) == []


def test_icon_is_16_by_16_in_current_color():
    assert icon_problems((ENTRY / "icon.svg").read_text(encoding="utf-8")) == []


def test_the_folder_holds_what_the_registry_takes():
    # The registry's folder for an agent: agent.json and icon.svg (the build sets `icon`).
    assert sorted(p.name for p in ENTRY.iterdir()) == ["agent.json", "icon.svg"]
    assert "icon" not in manifest()


# --- the checks catch what they are about ---------------------------------------------


def test_manifest_problems_are_found():
    good, project = manifest(), pyproject()

    def broken(**changes: Any) -> list[str]:
        entry = copy.deepcopy(good)
        for key, value in changes.items():
            if value is None:
                entry.pop(key)
            else:
                entry[key] = value
        return manifest_problems(entry, ENTRY.name, project)

    assert any("description" in p for p in broken(description=None))
    assert any("schema" in p for p in broken(id="Trio_ACP"))
    assert any("schema" in p for p in broken(distribution={"pip": {"package": "trio-acp"}}))
    assert any("folder" in p for p in broken(id="trio"))
    assert any("pyproject" in p for p in broken(version="9.9.9"))
    latest = {"uvx": {"package": "trio-acp@latest"}}
    assert any("pinned" in p for p in broken(distribution=latest))
    unpinned = {"uvx": {"package": "trio-acp"}}
    assert any("pinned" in p for p in broken(distribution=unpinned))
    other = {"uvx": {"package": f"trio-acp=={good['version']}.1"}}
    assert any("pins" in p for p in broken(distribution=other))
    wrong = {"uvx": {"package": f"openhands=={good['version']}"}}
    assert any("not this project" in p for p in broken(distribution=wrong))


def test_icon_problems_are_found():
    def svg(attrs: str, body: str = '<path d="M0 0h16v16z" fill="currentColor"/>') -> str:
        return f'<svg xmlns="http://www.w3.org/2000/svg" {attrs}>{body}</svg>'

    ok = 'width="16" height="16" viewBox="0 0 16 16"'
    assert icon_problems(svg(ok)) == []
    assert icon_problems(svg('viewBox="0 0 16 16"')) == []
    assert icon_problems(svg('width="24" height="24" viewBox="0 0 24 24"'))
    assert icon_problems(svg('width="16" height="12"'))
    assert icon_problems(svg(ok, '<path d="M0 0h16v16z" fill="#ff0000"/>'))
    assert icon_problems(svg(ok, '<path d="M0 0h16v16z" style="stroke: red"/>'))
    assert icon_problems(svg(ok, '<path d="M0 0h16v16z"/>'))  # black in every theme
    assert icon_problems(svg(ok, '<stop stop-color="#000"/><path fill="currentColor"/>'))
    assert icon_problems("<svg")
