"""Shared by the accounts, page and export tests: accounting_world (a small warehouse day to
account) and report_fixtures (a day of every relation the page reads) live here, and pytest
puts this folder on sys.path because this conftest is in it."""
