"""The demo (`mnemo-sea demo`) and the packaged sample data it walks through.

walkthrough  the demo's steps over an embedded store in a temporary folder
sample_data  the clinic and shop tenants, the session script and cited answers, with loaders
"""
