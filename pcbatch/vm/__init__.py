"""pcbatch.vm."""
