"""The archive's ground floor: what a value may be and who may read it, with no database.

Errors, the clock, principals and the one access rule, the policy, the records and operations,
tool results and their envelopes, references, input checks and limits, task-state rules.
Nothing here imports the storage or a feature.
"""
