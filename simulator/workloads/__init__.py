"""Workloads: arrival processes, length / reasoning / priority samplers, trace files.

Real data behind them lives in ``simulator/data/`` (sources, licenses and credits in its
README files).
"""

from simulator.workloads.arrivals import (
    ArrivalProcess,
    GammaArrivals,
    PiecewiseRateArrivals,
    PoissonArrivals,
    ServeGenRateArrivals,
)
from simulator.workloads.data_files import RateSeries, servegen_rate_series
from simulator.workloads.generate import generate_request_table, generate_requests, stream_requests
from simulator.workloads.lengths import (
    EMPIRICAL_DATASETS,
    PARAMETRIC_PRESETS,
    EmpiricalLengths,
    FixedLengths,
    LengthSampler,
    ParametricLengths,
    parametric_preset,
)
from simulator.workloads.load_profiles import LoadProfile, azure_profile, servegen_day_profile
from simulator.workloads.priorities import PRIORITY_DISTRIBUTIONS, sample_tiers, tier_probabilities
from simulator.workloads.reasoning import ReasoningLengthSampler, ServeGenReasoning
from simulator.workloads.registry import (
    ARRIVAL_PROCESSES,
    LENGTH_SAMPLER_NAMES,
    arrival_process,
    check_arrival_options,
    length_sampler,
    register_arrival_process,
)
from simulator.workloads.traces import load_azure_trace, load_trace_csv, write_trace_csv

__all__ = [
    "ARRIVAL_PROCESSES",
    "arrival_process",
    "azure_profile",
    "check_arrival_options",
    "register_arrival_process",
    "ArrivalProcess",
    "EMPIRICAL_DATASETS",
    "EmpiricalLengths",
    "FixedLengths",
    "GammaArrivals",
    "LENGTH_SAMPLER_NAMES",
    "LengthSampler",
    "LoadProfile",
    "PARAMETRIC_PRESETS",
    "PRIORITY_DISTRIBUTIONS",
    "ParametricLengths",
    "PiecewiseRateArrivals",
    "PoissonArrivals",
    "RateSeries",
    "ReasoningLengthSampler",
    "ServeGenRateArrivals",
    "ServeGenReasoning",
    "generate_request_table",
    "generate_requests",
    "stream_requests",
    "length_sampler",
    "load_azure_trace",
    "load_trace_csv",
    "parametric_preset",
    "sample_tiers",
    "servegen_day_profile",
    "servegen_rate_series",
    "tier_probabilities",
    "write_trace_csv",
]
