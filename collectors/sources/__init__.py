"""Sample sources, one module per kind of hardware, all keeping collectors.sources.base.Source."""
