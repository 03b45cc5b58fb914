#!/usr/bin/env qd-no-such-interpreter
echo hi
