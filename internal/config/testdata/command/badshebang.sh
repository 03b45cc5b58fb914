#!/nonexistent/interp
echo hi
