"""cea: class-driven embedding alignment.

Label-aware sentence embeddings: probe frozen encoders by kNN, fine-tune them so that texts of the
same class sit together, and classify by nearest neighbours.
"""

__version__ = "0.1.0"
