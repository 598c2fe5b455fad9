"""JUnit XML for CI systems: one test case per probe cycle and per threshold.

``benchd once --format junit`` writes a ``<testsuites>`` document with one
``<testsuite>`` per probe. Its ``cycle`` test case errors when the cycle
failed or timed out (``type`` = the error kind) and fails when it was
degraded (``type`` = ``degraded``, the reasons in the message; passed with
a note under ``--allow-degraded``); each threshold is a test case that
fails when breached or not measured. Jenkins, GitLab and GitHub test
reporters read this shape (the de-facto schema of Ant/Surefire reports).
"""

from __future__ import annotations

import re
import socket
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import UTC, datetime

from benchd import redact
from benchd.result import CycleResult

__all__ = ["render_junit"]

# Characters XML 1.0 cannot carry even escaped; a store's error text may hold them.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _text(value: object) -> str:
    return _NOT_XML.sub("?", redact.text(value))


def _case(parent: ET.Element, probe: str, name: str, time_s: float) -> ET.Element:
    return ET.SubElement(
        parent,
        "testcase",
        {"classname": f"benchd.{_text(probe)}", "name": _text(name), "time": f"{time_s:.3f}"},
    )


def _suite(result: CycleResult, host: str, allow_degraded: bool) -> ET.Element:
    verdicts = result.thresholds
    suite = ET.Element("testsuite", {"name": _text(result.probe)})
    props = ET.SubElement(suite, "properties")
    model = result.info.model if result.info is not None else ""
    for key, value in (
        ("target", result.target),
        ("corpus", result.corpus),
        ("model", model),
        ("outcome", result.outcome),
        ("fixture_hash", result.fixture_hash),
    ):
        ET.SubElement(props, "property", {"name": key, "value": _text(value)})
    cycle = _case(suite, result.probe, "cycle", result.duration_s)
    errors = failures = 0
    if result.outcome == "degraded":  # measured, but not wholly: a failure, not an error
        message = f"degraded: {', '.join(result.degraded_reasons) or 'no detail'}"
        if allow_degraded:  # as benchd once --allow-degraded exits: passed, with the note
            ET.SubElement(cycle, "system-out").text = _text(f"{message} (allowed)")
        else:
            failures = 1
            failure = ET.SubElement(
                cycle, "failure", {"type": "degraded", "message": _text(message)}
            )
            failure.text = _text(message)
    elif not result.ok:
        errors = 1
        message = f"outcome {result.outcome}: {result.error_message or 'no detail'}"
        kind = _text(result.error_kind or result.outcome)
        error = ET.SubElement(cycle, "error", {"type": kind, "message": _text(message)})
        error.text = _text(message)
    for verdict in verdicts:
        case = _case(suite, result.probe, verdict.threshold.name, 0.0)
        if verdict.breached:
            failures += 1
            failure = ET.SubElement(
                case, "failure", {"type": "threshold", "message": _text(verdict.describe())}
            )
            failure.text = _text(verdict.describe())
    started = datetime.fromtimestamp(result.started_at, UTC).replace(tzinfo=None)
    suite.attrib.update(
        {
            "tests": str(1 + len(verdicts)),
            "failures": str(failures),
            "errors": str(errors),
            "skipped": "0",
            "time": f"{result.duration_s:.3f}",
            "timestamp": started.isoformat(timespec="seconds"),
            "hostname": _text(host),
        }
    )
    return suite


def render_junit(results: Sequence[CycleResult], *, allow_degraded: bool = False) -> str:
    """The JUnit XML document for results, one suite per probe (a test case per threshold).

    ``allow_degraded`` (``--allow-degraded``) passes a degraded cycle's test case.
    """
    host = socket.gethostname()
    root = ET.Element("testsuites", {"name": "benchd"})
    totals = {"tests": 0, "failures": 0, "errors": 0}
    time_s = 0.0
    for result in results:
        suite = _suite(result, host, allow_degraded)
        root.append(suite)
        for key in totals:
            totals[key] += int(suite.attrib[key])
        time_s += result.duration_s
    root.attrib.update({k: str(v) for k, v in totals.items()})
    root.attrib["time"] = f"{time_s:.3f}"
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body
