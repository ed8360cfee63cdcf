"""Window assessment: is the recorded window steady state, and what limits what it can tell?

``assess`` holds one check per thing that makes a window not steady state (start-up, graph
capture, GPU work traced in part, degenerate steps, profiler overhead); ``spec`` the
registered ``window`` analysis that findings and the verdict read.
"""
