"""Realistic text for ``kind=faker`` columns: a pool of values built once with Faker, then indexed by draws.

A pool is `cardinality` values of one Faker provider (a method that takes no argument: ``name``, ``email``,
``city``, ``ipv4``, ``user_agent`` …) in one locale, made by a ``Faker(locale)`` whose instance is seeded with
the column's 64-bit pool key (`impulse.draws.stream_key` of seed, column path and ``faker``). Faker's seeded
output is fixed for a given Faker release (its providers' data and formats change between releases), so a pool
is a pure function of (seed, column path, provider, locale, cardinality, Faker's version). Non-text results
(dates, numbers, tuples) are kept as ``str(value)``.

Faker is the optional ``faker`` extra: it is imported here only, when a ``faker`` column is parsed on the
driver; the pool travels to the executors inside the column, so they need no Faker.
"""

from __future__ import annotations

from functools import lru_cache

import pyarrow as pa

from connectors.errors import OptionError

__all__ = ["pool", "EXTRA"]

EXTRA = "pip install 'impulse-connectors[faker]'"
_NOT_PROVIDERS = {"seed", "seed_instance", "seed_locale", "random", "format", "parse", "provider", "get_providers",
                  "add_provider", "set_arguments", "get_arguments", "del_arguments", "set_formatter", "get_formatter",
                  "unique", "optional", "weights", "locales", "factories", "items"}


@lru_cache(maxsize=32)
def pool(provider: str, locale: str, cardinality: int, key: int, prefix: str) -> pa.Array:
    """`cardinality` values (a STRING array, possibly with repeats) of `provider` in `locale`, from a Faker
    seeded with `key`. `prefix` (``fields.<path>.``) names the options in an `OptionError`: Faker missing, an
    unknown locale, or a provider that does not exist or needs arguments."""
    try:
        from faker import Faker  # noqa: PLC0415 - the faker extra
        from faker.config import AVAILABLE_LOCALES  # noqa: PLC0415 - the faker extra
    except ImportError:
        raise OptionError(prefix + "kind", "faker", f"the 'faker' extra installed for kind=faker ({EXTRA})") from None
    if locale not in AVAILABLE_LOCALES:
        near = [name for name in AVAILABLE_LOCALES if name.split("_")[0].lower() == locale.split("_")[0].lower()]
        raise OptionError(prefix + "locale", locale, "a locale of Faker such as en_US, de_DE, fr_FR, ja_JP"
                          + (f" (for this language: {', '.join(sorted(near))})" if near else ""))
    fake = Faker(locale)
    fake.seed_instance(key)
    method = None if provider.startswith("_") or provider in _NOT_PROVIDERS else getattr(fake, provider, None)
    if not callable(method):
        raise OptionError(prefix + "provider", provider, "a Faker provider method that takes no argument, e.g. name, "
                          "first_name, email, phone_number, city, country, street_address, postcode, ipv4, ipv6, "
                          "url, user_agent, company, job, iban, sentence")
    try:
        first = method()
    except TypeError as error:
        raise OptionError(prefix + "provider", provider, f"a Faker provider that takes no argument ({error})") from None
    values = [first] + [method() for _ in range(cardinality - 1)]
    return pa.array([v if isinstance(v, str) else str(v) for v in values], type=pa.string())
