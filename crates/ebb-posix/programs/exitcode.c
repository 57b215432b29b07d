/* The exit code: the program exits with the number it is given, and
 * whoever started it sees that number (natively: 0 to 126, what QEMU's
 * exit device carries; a larger code is said on the console and the
 * image exits with 1). */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: exitcode N\n");
		return 2;
	}
	int code = atoi(argv[1]);
	printf("exitcode: exiting with %d\n", code);
	return code;
}
