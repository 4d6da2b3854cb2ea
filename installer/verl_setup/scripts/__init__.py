"""Scripts that run inside a target interpreter (standard library only), as text.

They are data for the modules that run them and for the rendered files that embed them, so they
sit below both.
"""
