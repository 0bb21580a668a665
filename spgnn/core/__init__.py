"""Core objects: semirings, the local CSR type, distributed matrices and operators."""
