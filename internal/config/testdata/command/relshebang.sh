#!sh
echo hi
