"""rooftui.core: the roofline model of one LLM serving step, vectorised over numpy arrays.

Pure: numpy and the standard library only. One module per idea:
dtypes, hardware, model, assumptions, step, closed_forms (and the scheduler modules).
"""
