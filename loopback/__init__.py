"""Loopback stand-ins for services that no test here can reach, speaking their wire protocol.

Test infrastructure shared by the test suite and the benchmarks; not part of the installed
package, and never imported by it.
"""
