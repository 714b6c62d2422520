"""pcbatch.analysis."""
