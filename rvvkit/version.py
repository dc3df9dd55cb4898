"""rvvkit's version, in a module of its own: the code generator stamps it into every source
and the builder into every artifact, and neither should import the package face for it."""
__version__ = "0.1.0"
