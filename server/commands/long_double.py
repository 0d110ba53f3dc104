"""INCRBYFLOAT's arithmetic: x87 80-bit `long double`, as Redis computes it on x86-64.

Redis parses both operands with strtold, adds them in long double precision
(64-bit significand) and prints the sum with "%.17Lf", trailing zeros
removed. Python floats are 53-bit doubles, so 0.1 + 0.2 would print as
0.30000000000000004 where Redis prints 0.3. Values here are exact
`Fraction`s rounded to the nearest long double (ties to even) after each
step, which reproduces Redis's strings bit for bit.
"""

from __future__ import annotations

import re
from fractions import Fraction

from protocol.errors import NOT_FLOAT, ReplyError

SIGNIFICAND_BITS = 64
MIN_EXPONENT = -16382  # of the smallest normal number, 2**-16382
MAX_EXPONENT = 16383  # the largest finite numbers are below 2**16384
MAX_CHARS = 5 * 1024  # Redis's MAX_LONG_DOUBLE_CHARS

INF = "inf"  # a marker: overflow or an "inf" operand
_DECIMAL = re.compile(rb"([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?")
_HEX = re.compile(rb"([+-]?)0[xX]([0-9a-fA-F]*)(?:\.([0-9a-fA-F]*))?(?:[pP]([+-]?\d+))?")
_INFINITY = re.compile(rb"([+-]?)(?:inf|infinity)", re.IGNORECASE)


def _floor_log2(q: Fraction) -> int:
    num, den = q.numerator, q.denominator
    e = num.bit_length() - den.bit_length()
    if (num << max(0, -e)) < (den << max(0, e)):
        e -= 1
    return e


def round_to_long_double(q: Fraction) -> Fraction | str:
    """The long double nearest to q (ties to even); INF when it overflows."""
    if q == 0:
        return Fraction(0)
    sign = -1 if q < 0 else 1
    q = abs(q)
    e = max(_floor_log2(q), MIN_EXPONENT)  # below the normal range the quantum stays 2**(MIN_EXPONENT - 63)
    shift = SIGNIFICAND_BITS - 1 - e
    scaled = q * (Fraction(2) ** shift)
    n, rem = divmod(scaled.numerator, scaled.denominator)
    twice = 2 * rem
    if twice > scaled.denominator or (twice == scaled.denominator and n & 1):
        n += 1
    if n.bit_length() > SIGNIFICAND_BITS:
        n >>= 1
        shift -= 1
    if n and (n.bit_length() - 1 - shift) > MAX_EXPONENT:
        return INF
    return sign * Fraction(n) / (Fraction(2) ** shift)


def _integer(digits: bytes) -> int:
    """int(digits) for any length (Python refuses more than 4300 digits at once)."""
    n = 0
    for start in range(0, len(digits), 4000):
        chunk = digits[start : start + 4000]
        n = n * 10 ** len(chunk) + int(chunk)
    return n


def parse(arg: bytes) -> Fraction | str:
    """Redis's string2ld (strtold, then no spaces, no trailing bytes, no NaN, no overflow or underflow to 0)."""
    if not arg or len(arg) >= MAX_CHARS:
        raise ReplyError(NOT_FLOAT)
    match = _DECIMAL.fullmatch(arg)
    if match is not None and (match[2] or match[3]):
        sign, whole, fraction, exponent = match[1], match[2], match[3] or b"", match[4]
        base, digit_bits = 10, 3.33
    else:
        match = _HEX.fullmatch(arg)  # strtold reads C99 hex floats too: 0x1.8p3
        if match is None or not (match[2] or match[3]):
            if _INFINITY.fullmatch(arg):
                return INF
            raise ReplyError(NOT_FLOAT)
        sign, whole, fraction, exponent = match[1], match[2], match[3] or b"", match[4]
        base, digit_bits = 16, 4
    digits = (whole + fraction).lstrip(b"0")
    if not digits:
        return Fraction(0)
    exponent_value = int(exponent[:12]) if exponent else 0  # saturating: a longer one overflows anyway
    if exponent and len(exponent.lstrip(b"+-").lstrip(b"0")) > 11:
        exponent_value = -(10**12) if exponent[:1] == b"-" else 10**12
    if base == 10:
        power = exponent_value - len(fraction)
        magnitude = len(digits) + power  # the value is below 10**magnitude
        if magnitude > 4933:
            raise ReplyError(NOT_FLOAT)  # overflow: strtold gives HUGE_VAL with ERANGE
        if magnitude < -4951:
            raise ReplyError(NOT_FLOAT)  # underflow to zero with ERANGE
        value = Fraction(_integer(digits)) * (Fraction(10) ** power)
    else:
        power = exponent_value - 4 * len(fraction)  # in bits
        magnitude = digit_bits * len(digits) + power
        if magnitude > MAX_EXPONENT + 8 or magnitude < MIN_EXPONENT - 80:
            raise ReplyError(NOT_FLOAT)
        value = Fraction(int(digits, 16)) * (Fraction(2) ** power)
    if sign == b"-":
        value = -value
    rounded = round_to_long_double(value)
    if rounded == INF or rounded == 0:
        raise ReplyError(NOT_FLOAT)
    return rounded


def _decimal(n: int) -> str:
    """str(n) for ints of any size (Python refuses more than 4300 digits at once)."""
    if n < 10**4000:
        return str(n)
    chunks = []
    while n:
        n, chunk = divmod(n, 10**4000)
        chunks.append(chunk)
    return str(chunks[-1]) + "".join(f"{chunk:04000d}" for chunk in reversed(chunks[:-1]))


def format_human(value: Fraction) -> bytes:
    """"%.17Lf" with trailing zeros (and a trailing '.') removed, "-0" as "0"."""
    scaled = abs(value) * 10**17
    n, rem = divmod(scaled.numerator, scaled.denominator)
    twice = 2 * rem
    if twice > scaled.denominator or (twice == scaled.denominator and n & 1):
        n += 1
    whole, fraction = divmod(n, 10**17)
    text = f"{_decimal(whole)}.{fraction:017d}".rstrip("0").rstrip(".")
    if value < 0 and text != "0":
        text = "-" + text
    return text.encode()


def add(current: bytes | None, increment: bytes) -> bytes:
    """INCRBYFLOAT's new value as Redis stores it; errors in Redis's words."""
    value = parse(current) if current is not None else Fraction(0)
    delta = parse(increment)
    if value == INF or delta == INF:
        raise ReplyError("ERR increment would produce NaN or Infinity")
    total = round_to_long_double(value + delta)
    if total == INF:
        raise ReplyError("ERR increment would produce NaN or Infinity")
    return format_human(total)
