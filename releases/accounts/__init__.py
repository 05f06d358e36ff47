"""Signing in: failed sign-ins throttle an address with growing delays, many addresses failing
for one user name lock it until it is released (``throttle``, ``services``, ``handler``), and the
password reset by e-mail (``views``)."""
