"""Redis 8 stream features (issue 21): each feature's figures beside the way it replaces.

The rows come from one module per feature, so each part of the issue adds its
own: bench/r8_claim.py (XREADGROUP ... CLAIM against XAUTOCLAIM + XREADGROUP),
bench/r8_ackdel.py (XACKDEL against XACK + XDEL, beside Redis 8.2.3),
bench/r8_idmp.py (XADD IDMPAUTO / IDMP against plain XADD, Millrace alone).
"""

from __future__ import annotations

from .harness import Env, Row
from .r8_ackdel import ackdel_rows
from .r8_claim import claim_rows
from .r8_idmp import idmp_rows

SUITE = "r8"


def run(env: Env) -> list[Row]:
    return [*claim_rows(env, SUITE), *ackdel_rows(env, SUITE), *idmp_rows(env, SUITE)]
