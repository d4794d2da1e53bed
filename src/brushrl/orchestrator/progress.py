"""A one-line-per-step progress display that reads well in a terminal and in a Ray job log."""

from __future__ import annotations

import time


class StepLine:
    """Prints ``step 3/20 [#####.....] reward 0.412 gate 75% 28.1 s/step eta 7m58s`` per step."""

    def __init__(self, total: int, out, width: int = 20, first_step: int = 1):
        self.total, self.out, self.width, self.first = total, out, width, first_step
        self.start = time.perf_counter()

    def update(self, step: int, record: dict) -> None:
        """Print the line for ``step`` from its metrics ``record``."""
        elapsed = time.perf_counter() - self.start
        per_step = elapsed / max(step - self.first + 1, 1)
        done = int(self.width * step / self.total)
        reward = record.get("reward/mean")
        reward_txt = "  None" if reward is None else f"{reward:.3f}"
        eta = per_step * (self.total - step)
        print(
            f"step {step:>3}/{self.total} [{'#' * done}{'.' * (self.width - done)}] "
            f"reward {reward_txt} gate {100 * record.get('gate/pass_rate', 0):3.0f}% "
            f"render p50 {record.get('render/p50_s', 0):.1f}s {per_step:.1f} s/step "
            f"eta {_duration(eta)}",
            file=self.out,
            flush=True,
        )


def _duration(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


class CountLine:
    """One line per finished unit of a long job with a known count, e.g. ``brushrl eval``'s groups:
    ``[eval] groups 5/24 (base 5/12) 63 s, eta 3m40s``. The ETA is the elapsed time per unit so far
    times the units left (units of a job take about as long as each other: one group each)."""

    def __init__(self, prefix: str, total: int, out):
        self.prefix, self.total, self.out = prefix, total, out
        self.done = 0
        self.start = time.perf_counter()

    def tick(self, detail: str = "") -> None:
        """Count one finished unit and print its line; ``detail`` goes in parentheses."""
        self.done += 1
        elapsed = time.perf_counter() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        print(f"{self.prefix} {self.done}/{self.total}{f' ({detail})' if detail else ''} {elapsed:.0f} s, "
              f"eta {_duration(eta)}", file=self.out, flush=True)
