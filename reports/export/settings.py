"""[export]: the signed recommended-config file and where node agents fetch it.

A section of the settings file (joulehouse.settings assembles them; collectors.settings reads
them); every value is checked when read, so a bad validity fails before the day's tables are
written, not at the export.
"""

from __future__ import annotations

from pydantic import Field

from joulehouse.collectors.settings import Location, LocationOrNone, Positive, Text, section


@section
class ExportSettings:
    """The signed recommended-config file."""

    out_dir: Location = Field("var/export", description="Where the signed files are written.")
    private_key_path: Location = Field("var/keys/joulehouse-ed25519.pem", description="The site's ed25519 signing key.")
    validity_hours: Positive = Field(48.0, le=8784, description="How long a config stays valid after the day it comes from, h\n"
                                                                "(at most a year: an agent takes a valid config until it expires).")
    site: Text = Field("site-a", description="The site named in the signed body, so an agent can tell one site's file from another's.")
    metrics_textfile: LocationOrNone = Field(
        "", description="The day's headline as Prometheus metrics (a *.prom file for node_exporter's textfile collector);\n"
                        "'' puts it beside the export folder: <out_dir>/../metrics/joulehouse_daily.prom.")
    publish_url: LocationOrNone = Field(
        "", description="Where node agents fetch the config (a folder or fsspec URL); empty: the export folder is served as is.")
