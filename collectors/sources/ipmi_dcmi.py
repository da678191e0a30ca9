"""When the IPMI source asks its BMC for the DCMI power reading again, and what it says in the log.

Two kinds of poll without a DCMI reading can go on for hours:
- no answer (timed out, or ipmitool got no response) while the SDR answered, as many older BMCs do;
- a refusal: a completion code other than "Invalid command" (that one means no DCMI at all and is
  the source's own: not asked again), e.g. "Invalid data field in request (cc)" or "Command not
  supported in present state (d5)".
After `silent_polls` of them in a row, DCMI is asked once every `retry_interval_s` (monotonic
seconds), never given up: a refusal in the present state may clear, a BMC reset may bring DCMI
back. The log says a refusal once when it starts and once when its text changes, a back-off after
silence once, and DCMI answering again once; every row still says why its `power_w` is NULL.
Before, a refusal was a warning at every poll (100 polls, 100 warnings) and asked at every poll.

Its own module: the bookkeeping is one state machine, and ipmi.py (reading and parsing) was at its
size limit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

# the IPMI source's own logger: an operator filtering on it sees the DCMI lines too
log = logging.getLogger(__name__.removesuffix("_dcmi"))


class DcmiBackoff:
    """Whether DCMI is due this poll, given how the polls before it went."""

    def __init__(self, bmc: str, silent_polls: int, retry_interval_s: float, monotonic: Callable[[], float]):
        if silent_polls < 1 or not 0 < retry_interval_s < float("inf"):
            raise ValueError(f"dcmi_silent_polls={silent_polls!r}, dcmi_retry_interval_s={retry_interval_s!r}: "
                             "expected at least 1 poll and a finite interval above 0 s")
        self.bmc = bmc  # host:port, for the log
        self.silent_polls = silent_polls
        self.retry_interval_s = retry_interval_s
        self._monotonic = monotonic
        self._polls_without_reading = 0  # in a row: unanswered with the SDR answering, or refused
        self._retry_at: float | None = None  # monotonic s; set while DCMI is backed off
        self._last_failure = ""  # how the last poll without a reading went, for `not_asked_reason`
        self._refusal: str | None = None  # the refusal said in the log, until DCMI answers

    @property
    def backed_off(self) -> bool:
        return self._retry_at is not None

    def due(self) -> bool:
        """Whether DCMI is asked this poll."""
        return self._retry_at is None or self._monotonic() >= self._retry_at

    def not_asked_reason(self) -> str:
        """`power_w_null_reason` of a poll that did not ask DCMI."""
        return (f"dcmi not asked: backed off after {self.silent_polls} polls in a row without a reading, the last "
                f"{self._last_failure}; asked again every {self.retry_interval_s:g} s")

    def answered(self) -> None:
        """DCMI answered (a reading, or a state): the row of polls without a reading ends."""
        if self._retry_at is not None or self._refusal is not None:
            log.info("ipmi: BMC %s answers DCMI power reading again", self.bmc)
        self._polls_without_reading, self._retry_at, self._refusal = 0, None, None

    def refused(self, text: str) -> None:
        """DCMI refused with `text` (ipmitool's words): said in the log when it starts or its words change."""
        if text != self._refusal:
            log.warning("ipmi: BMC %s refuses DCMI power reading: %s; power_w stays NULL while it does (the SDR is "
                        "still read), and after %d polls in a row without a reading DCMI is asked every %g s",
                        self.bmc, text, self.silent_polls, self.retry_interval_s)
            self._refusal = text
        self._count(f"refused: {text!r}")

    def unanswered_while_sdr_answered(self) -> None:
        """DCMI gave no answer though the BMC answered the SDR."""
        if self._retry_at is None and self._polls_without_reading + 1 >= self.silent_polls:
            log.warning("ipmi: BMC %s gave no DCMI power reading %d polls in a row, the last unanswered while its SDR "
                        "answered; power_w stays NULL (the SDR is still read) and DCMI is asked again every %g s",
                        self.bmc, self._polls_without_reading + 1, self.retry_interval_s)
        self._count("unanswered while the SDR answered")

    def bmc_away(self) -> None:
        """The whole BMC gave no answer: its DCMI was not silent on its own, the row ends."""
        self._polls_without_reading = 0

    def _count(self, failure: str) -> None:
        self._polls_without_reading += 1
        self._last_failure = failure
        if self._retry_at is not None or self._polls_without_reading >= self.silent_polls:
            self._retry_at = self._monotonic() + self.retry_interval_s
