"""mvopt: black-box optimization of LLM training-cluster configurations by batched packet-level simulation."""

__version__ = "0.1.0"
__all__ = ["__version__"]
