"""accelbench: how fast is this accelerator, really? Reproducible PyTorch benchmarks on Snakemake."""

__version__ = "0.1.0"
