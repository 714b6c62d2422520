"""Markov chain Monte Carlo on pcbatch: the No-U-Turn Sampler for many chains at once."""

from pcbatch.mcmc import diagnostics, nuts

__all__ = ["diagnostics", "nuts"]
