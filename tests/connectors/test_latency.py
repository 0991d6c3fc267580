import numpy as np
from hdrh.histogram import HdrHistogram

from connectors.latency import LatencyHistogram


def test_percentiles_within_the_bucket_error():
    rng = np.random.default_rng(7)
    samples = rng.lognormal(mean=9, sigma=1.5, size=50_000).astype(np.int64) + 1
    histogram = LatencyHistogram()
    histogram.record(samples[:20_000])
    histogram.merge(LatencyHistogram.from_dict(_recorded(samples[20_000:]).to_dict()))
    assert histogram.count == len(samples) and histogram.max_us == samples.max()
    assert histogram.total_us == samples.sum()
    ordered = np.sort(samples)
    for p in (50, 95, 99, 99.9, 99.99):
        exact = ordered[int(np.ceil(round(len(samples) * p / 100, 6))) - 1]  # the value of rank ⌈n·p⌉
        assert 0 <= histogram.percentile(p) - exact <= exact / 1000, p  # 3 significant digits, never below
    assert histogram.percentile(100) == samples.max()


def test_the_encoding_is_standard_hdrhistogram():
    samples = np.arange(1, 100_001, dtype=np.int64) * 37
    encoded = _recorded(samples).to_dict()["hdr"]
    plain = HdrHistogram.decode(encoded)  # any HdrHistogram reader
    assert plain.get_total_count() == len(samples)
    for p in (50, 99, 99.99):
        assert abs(plain.get_value_at_percentile(p) - np.percentile(samples, p)) <= np.percentile(samples, p) / 1000


def test_count_above():
    histogram = _recorded(np.array([1_000] * 90 + [3_000_000] * 10))
    assert histogram.count_above(1_000_000) == 10
    assert histogram.count_above(3_100_000) == 0
    assert histogram.count_at_or_below(2_000) == 90


def test_empty_and_negative():
    empty = LatencyHistogram()
    assert empty.percentile(99) == 0 and empty.mean_us == 0 and empty.to_dict()["count"] == 0
    assert LatencyHistogram.from_dict(empty.to_dict()).count == 0
    histogram = _recorded(np.array([-5, 0, 10]))
    assert histogram.count == 3 and histogram.max_us == 10 and histogram.percentile(34) == 0


def _recorded(values):
    histogram = LatencyHistogram()
    histogram.record(values)
    return histogram


def test_vectorised_recording_fills_the_slots_hdrhistogram_would():
    samples = np.concatenate([np.arange(0, 5_000), np.random.default_rng(3).integers(1, 3_600_000_000, 20_000)])
    reference = HdrHistogram(1, 3_600_000_000, 3)
    for value in samples.tolist():
        reference.record_value(value)
    ours = _recorded(samples).hdr
    assert list(ours.counts) == list(reference.counts)
    assert (ours.get_total_count(), ours.get_min_value(), ours.get_max_value()) == \
        (reference.get_total_count(), reference.get_min_value(), reference.get_max_value())
