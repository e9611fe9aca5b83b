"""The demo (`mnemo-sea demo`) and the packaged sample data it walks through.

walkthrough     the demo's steps over an embedded store in a temporary folder
samples         loads the packaged sample data: the clinic and shop tenants, cited answers, the script
session_script  the session script's format, its records and its parser
tool_outputs    the generators of the script's long tool outputs (a tracking log, a lab log)
sample_data     the data files themselves (package data, no code)
"""
