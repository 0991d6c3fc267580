import numpy as np

from connectors.latency import LatencyHistogram


def test_percentiles_within_the_bucket_error():
    rng = np.random.default_rng(7)
    samples = rng.lognormal(mean=9, sigma=1.5, size=50_000).astype(np.int64) + 1
    histogram = LatencyHistogram()
    histogram.record(samples[:20_000])
    histogram.merge(LatencyHistogram.from_dict(_recorded(samples[20_000:]).to_dict()))
    assert histogram.count == len(samples) and histogram.max_us == samples.max()
    assert histogram.total_us == samples.sum()
    for p in (50, 95, 99, 99.9):
        exact = np.percentile(samples, p, method="inverted_cdf")
        assert abs(histogram.percentile(p) - exact) / exact < 0.035, p
    assert histogram.percentile(100) == samples.max()


def test_empty_and_negative():
    empty = LatencyHistogram()
    assert empty.percentile(99) == 0 and empty.mean_us == 0
    histogram = _recorded(np.array([-5, 0, 10]))
    assert histogram.count == 3 and histogram.max_us == 10 and histogram.percentile(34) <= 1.05


def _recorded(values):
    histogram = LatencyHistogram()
    histogram.record(values)
    return histogram
