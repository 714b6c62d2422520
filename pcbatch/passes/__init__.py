"""pcbatch.passes."""
