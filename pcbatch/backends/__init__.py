"""pcbatch.backends."""
