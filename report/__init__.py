"""`provision report`: one static HTML page (and the same data as JSON) of a site's whole bring-up."""

from report.build import as_json, default_output, gather
from report.model import Report
from report.render import SECTIONS, render_html, write_html

__all__ = ["SECTIONS", "Report", "as_json", "default_output", "gather", "render_html", "write_html"]
