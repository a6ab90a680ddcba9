"""The report of ``webhook_attack.py``: the fast path and aiohttp alone side by side, with
the ratio fast / alone, and the targets as PASS or MISS. To stderr: stdout is for ``--json``.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from benchmarks._attack_noread import STALL_LIMIT

# What aiohttp alone kept per unread connection when the attack was first measured on this
# kind of machine; printed next to the figure measured in the run, which is the one judged.
ALONE_EARLIER = "about 1.1-1.4 MiB here"


def _out(line: str = "") -> None:
    print(line, file=sys.stderr)


def _ratio(fast: float | None, alone: float | None) -> str:
    if fast is None or alone is None or alone == 0 or math.isnan(fast) or math.isnan(alone):
        return "-"
    return f"{fast / alone:.2f}"


def _row(label: str, fast: float | None, alone: float | None, unit: str, digits: int = 1) -> None:
    def cell(value: float | None) -> str:
        return "-" if value is None else f"{value:.{digits}f} {unit}"

    _out(f"  {label:34} {cell(fast):>14} {cell(alone):>14} {_ratio(fast, alone):>10}")


def _text_row(label: str, fast: str, alone: str) -> None:
    _out(f"  {label:34} {fast:>14} {alone:>14}")


def _verdict(met: bool) -> str:
    return "PASS" if met else "MISS"


def _header(title: str) -> None:
    _out(title)
    _out(f"  {'':34} {'fast path':>14} {'aiohttp alone':>14} {'fast/alone':>10}")


def report_trickle(trickle: dict[str, Any], options: dict[str, Any], factor: float) -> None:
    fast, alone = trickle["fast"], trickle["alone"]
    _header(f"trickle: {options['attackers']} attackers, a whole head then the body one byte "
            f"per TLS record every {options['trickle_ms']:g} ms; the victim: cached reviews "
            f"one at a time for {options['duration']:g} s")  # fmt: skip
    base_f, base_a = fast["baseline"], alone["baseline"]
    _row("baseline p50", base_f["p50_ms"], base_a["p50_ms"], "ms", 2)
    _row("baseline p99", base_f["p99_ms"], base_a["p99_ms"], "ms", 2)
    _row("baseline server CPU", base_f["server_cpu_seconds"], base_a["server_cpu_seconds"], "s", 2)
    _row("baseline reviews", base_f["reviews"], base_a["reviews"], "", 0)
    for name, attack_f in fast["attacks"].items():
        attack_a = alone["attacks"][name]
        vf, va = attack_f["victim"], attack_a["victim"]
        _out(f"  under attack, {name}:")
        _row("victim p50", vf["p50_ms"], va["p50_ms"], "ms", 2)
        _row("victim p99", vf["p99_ms"], va["p99_ms"], "ms", 2)
        _row("victim max", vf["max_ms"], va["max_ms"], "ms", 1)
        _row("p99 attack / baseline", attack_f["p99_ratio"], attack_a["p99_ratio"], "x", 1)
        _row("victim reviews", vf["reviews"], va["reviews"], "", 0)
        _row("victim reviews not answered 200", vf["failed"], va["failed"], "", 0)
        _row("server CPU in the window", vf["server_cpu_seconds"], va["server_cpu_seconds"],
             "s", 2)  # fmt: skip
        af, aa = attack_f["attackers"], attack_a["attackers"]
        _row("attacker connections", af["connections"], aa["connections"], "", 0)
        _row("attacker bytes trickled", af["bytes_trickled"], aa["bytes_trickled"], "", 0)
        _row("attackers' own CPU", af["cpu_seconds"], aa["cpu_seconds"], "s", 2)
        for mode, figures in (("fast path", af), ("aiohttp alone", aa)):
            answers = ", ".join(f"{n} {s}" for s, n in figures["answers"].items()) or "none"
            _out(f"    {mode} answered the attackers: {answers}")
        _text_row(f"target p99 <= {factor:g}x baseline, all 200",
                  _verdict(attack_f["met"]), _verdict(attack_a["met"]))  # fmt: skip


def report_no_read(memory: dict[str, Any]) -> None:
    fast, alone = memory["fast"], memory["alone"]
    nf, na = fast["no_read"], alone["no_read"]
    _header(f"no-read: {nf['clients']} clients pipeline small cached reviews and never read; "
            "server VmRSS")  # fmt: skip
    idle_f, idle_a = fast["idle"], alone["idle"]
    _row(f"idle TLS connection ({idle_f['connections']}), each", idle_f["per_connection_mib"],
         idle_a["per_connection_mib"], "MiB", 3)  # fmt: skip
    _row("RSS before", nf["rss_before_mib"], na["rss_before_mib"], "MiB")
    _row("RSS once stalled (+2 s)", nf["rss_stalled_mib"], na["rss_stalled_mib"], "MiB")
    _row("  per unread connection", nf["per_client_stalled_mib"], na["per_client_stalled_mib"],
         "MiB", 2)  # fmt: skip
    _row(f"RSS {nf['hold_seconds']:g} s later, still open", nf["rss_held_mib"],
         na["rss_held_mib"], "MiB")  # fmt: skip
    _row("  per unread connection", nf["per_client_held_mib"], na["per_client_held_mib"],
         "MiB", 2)  # fmt: skip
    _row("RSS after closing (+2 s)", nf["rss_closed_mib"], na["rss_closed_mib"], "MiB")
    _row("  per connection, not returned", nf["per_client_closed_mib"],
         na["per_client_closed_mib"], "MiB", 2)  # fmt: skip
    stall = [f"{v:g} s" if v is not None else f"not in {STALL_LIMIT:g} s"
             for v in (nf["stall_seconds"], na["stall_seconds"])]  # fmt: skip
    _text_row("every client stalled after", *stall)
    _row("server CPU, connect to stalled", nf["server_cpu_to_stalled_seconds"],
         na["server_cpu_to_stalled_seconds"], "s", 2)  # fmt: skip
    _row(f"server CPU in the {nf['hold_seconds']:g} s held", nf["server_cpu_held_seconds"],
         na["server_cpu_held_seconds"], "s", 2)  # fmt: skip
    _row("reviews each client got out", nf["requests_per_client"], na["requests_per_client"],
         "", 0)  # fmt: skip
    _row("connections closed by the server", nf["closed_by_server"], na["closed_by_server"],
         "", 0)  # fmt: skip
    fast_mib, alone_mib = nf["per_client_stalled_mib"], na["per_client_stalled_mib"]
    _text_row("target per unread <= aiohttp alone", _verdict(fast_mib <= alone_mib), "")
    _out(f"    (aiohttp alone: {alone_mib:.2f} MiB per unread connection in this run; "
         f"{ALONE_EARLIER})")  # fmt: skip


def report(figures: dict[str, Any], factor: float) -> None:
    _out()
    _out("imagecheck serve under attack, fast path against IMAGECHECK_FASTPATH=0")
    _out(f"machine before: {figures['machine_before']}")
    _out(f"machine after:  {figures['machine_after']}")
    if "trickle" in figures:
        _out()
        report_trickle(figures["trickle"], figures["options"], factor)
    if "no_read" in figures:
        _out()
        report_no_read(figures["no_read"])
