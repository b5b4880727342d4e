"""The demo's corpus and queries, as Python data (nothing to download).

Every document has look-alikes: quarterly reports of several companies and quarters, handbooks of
two offices, manuals of two products, executors of one fuzzer. Their chunks are ambiguous out of
context, like the Contextual Retrieval post's "The company's revenue grew by 3% over the previous
quarter": the chunk that answers a query does not name what the query names (the company, the
quarter, the office, the product, the class), so plain retrieval cannot tell it from its
look-alikes, while its context can.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["DEMO_DOCUMENTS", "DEMO_QUERIES", "DemoQuery"]


def _report(company: str, quarter: str, growth: str, revenue: str, driver: str, staff: str, outlook: str) -> str:
    return f"""# {company} — {quarter} quarterly report

{company} reports its results for {quarter}. All figures are unaudited and in US dollars. Comparisons are with the previous quarter unless stated otherwise.

## Revenue

The company's revenue grew by {growth} over the previous quarter, to {revenue}. {driver}

## Headcount

Headcount ended the quarter at {staff}. Hiring focused on engineering and customer support, while attrition fell for the third quarter in a row.

## Outlook

{outlook} The guidance assumes no change in exchange rates and no acquisitions.
"""


def _handbook(office: str, weeks: str, hours: str, holidays: str) -> str:
    return f"""# Employee handbook: {office} office

This handbook describes the policies that apply to everyone employed at the {office} office. Where local law gives more, the law applies.

## Parental leave

Employees are entitled to {weeks} weeks of fully paid leave after the birth or adoption of a child. Leave can be split into blocks and must be taken within two years.

## Working hours

The standard working week is {hours} hours. Core hours are 10:00 to 15:00; outside them, schedules are flexible. Overtime is compensated with time off.

## Public holidays

The office closes on {holidays} public holidays a year. The list is published every December.
"""


def _manual(product: str, seconds: str, light: str, battery: str) -> str:
    return f"""# {product} user manual

Thank you for buying the {product}. Read the safety notes before first use and keep this manual for future reference.

## Charging

Connect the USB-C cable. A full charge takes about {battery}; the light turns solid green when done.

## Resetting the device

To restore the factory settings, hold the power button for {seconds} seconds until the light blinks {light}. Release it and wait: the device restarts on its own. All settings and paired phones are erased.

## Cleaning

Wipe the device with a soft, dry cloth. Do not use solvents or cleaning sprays, and never put the device under running water.
"""


_DIFFERENTIAL = '''"""Executors that run one input on two targets and compare what they do."""

from .base import Executor, ExitKind


class DiffExecutor(Executor):
    """Runs every input on a primary and a secondary executor and reports a crash when their
    observable behaviour differs: the exit kind, the output, or the coverage map.

    Differential fuzzing finds bugs that never crash on their own: a parser that accepts what its
    reference rejects, an optimiser that changes a result, two versions of a library that disagree.
    Both executors must be deterministic, or every run would look like a difference.
    """

    def __init__(self, primary: Executor, secondary: Executor, compare_coverage: bool = False):
        self.primary = primary
        self.secondary = secondary
        self.compare_coverage = compare_coverage

    def run_target(self, input: bytes) -> ExitKind:
        first = self.primary.run_target(input)
        second = self.secondary.run_target(input)
        if first != second:
            return ExitKind.DIFF
        if self.compare_coverage and self.primary.coverage() != self.secondary.coverage():
            return ExitKind.DIFF
        return first
'''

_FORKSERVER = '''"""Executors that run targets in a child process forked from a waiting fork server."""

import os

from .base import Executor, ExitKind


class ForkserverExecutor(Executor):
    """Starts the target once, stopped before main, and forks a fresh child for every input: the
    cost of exec and of the dynamic loader is paid once instead of once per run.

    The target must be built with the fork server instrumentation; a target that is not prints a
    warning at start-up and the executor falls back to starting a new process per input.
    """

    def __init__(self, program: str, timeout_ms: int = 1000):
        self.program = program
        self.timeout_ms = timeout_ms
        self.server = None

    def run_target(self, input: bytes) -> ExitKind:
        child = self.server.fork()
        child.write_input(input)
        status = child.wait(self.timeout_ms)
        if status.timed_out:
            return ExitKind.TIMEOUT
        if status.signal:
            return ExitKind.CRASH
        return ExitKind.OK
'''

_INPROCESS = '''"""Executors that call the target function in this process."""

from .base import Executor, ExitKind


class InProcessExecutor(Executor):
    """Calls a harness function directly, with no process boundary: the fastest executor, at the
    price that a crash in the target ends the fuzzer, and leaks or global state carry over from
    one input to the next.

    Use it for pure functions and parsers; prefer the fork server for targets with global state.
    """

    def __init__(self, harness, timeout_ms: int = 1000):
        self.harness = harness
        self.timeout_ms = timeout_ms

    def run_target(self, input: bytes) -> ExitKind:
        try:
            self.harness(input)
        except TimeoutError:
            return ExitKind.TIMEOUT
        except Exception:
            return ExitKind.CRASH
        return ExitKind.OK
'''

#: (path, text) of every document of the demo corpus.
DEMO_DOCUMENTS: list[tuple[str, str]] = [
    ("reports/acme-2023-q1.md", _report(
        "ACME Corp", "Q1 2023", "5%", "$398 million", "Growth came mostly from renewals of existing contracts.",
        "1,150 employees", "Management expects demand to stay strong through the summer.")),
    ("reports/acme-2023-q2.md", _report(
        "ACME Corp", "Q2 2023", "3%", "$412 million", "New customers in Europe made up most of the increase.",
        "1,200 employees", "Management expects growth to slow in the second half as two large contracts end.")),
    ("reports/globex-2023-q2.md", _report(
        "Globex", "Q2 2023", "7%", "$1.2 billion", "Higher prices offset slightly lower volumes.",
        "8,400 employees", "Management expects a stronger second half, driven by the launch of two new plants.")),
    ("reports/initech-2023-q2.md", _report(
        "Initech", "Q2 2023", "2%", "$88 million", "The consulting business grew while licences were flat.",
        "640 employees", "Management expects flat revenue in the second half while the product line is renewed.")),
    ("reports/umbrella-2023-q2.md", _report(
        "Umbrella Corporation", "Q2 2023", "4%", "$2.9 billion", "Pharmaceutical sales led the increase.",
        "21,000 employees", "Management expects growth to continue at a similar pace for the rest of the year.")),
    ("handbook/berlin-office.md", _handbook("Berlin", "16", "38", "ten")),
    ("handbook/austin-office.md", _handbook("Austin", "12", "40", "eleven")),
    ("manuals/widget-pro.md", _manual("Widget Pro", "10", "red three times", "two hours")),
    ("manuals/widget-mini.md", _manual("Widget Mini", "5", "blue twice", "ninety minutes")),
    ("fuzzer/executors/differential.py", _DIFFERENTIAL),
    ("fuzzer/executors/forkserver.py", _FORKSERVER),
    ("fuzzer/executors/inprocess.py", _INPROCESS),
]


class DemoQuery(NamedTuple):
    """A sample query and the chunk that answers it: the one in `path` that contains `marker`."""

    query: str
    path: str
    marker: str


DEMO_QUERIES: list[DemoQuery] = [
    DemoQuery("How much did ACME's revenue grow in Q2 2023?", "reports/acme-2023-q2.md", "grew by 3%"),
    DemoQuery("How many people did Umbrella Corporation employ at the end of Q2 2023?",
              "reports/umbrella-2023-q2.md", "21,000 employees"),
    DemoQuery("How many weeks of parental leave do employees get at the Austin office?",
              "handbook/austin-office.md", "12 weeks"),
    DemoQuery("How do I reset the Widget Mini to factory settings?", "manuals/widget-mini.md", "5 seconds"),
    DemoQuery("How does DiffExecutor run a target?", "fuzzer/executors/differential.py", "first = self.primary"),
    DemoQuery("What is Globex's outlook for the second half of 2023?", "reports/globex-2023-q2.md", "two new plants"),
]
