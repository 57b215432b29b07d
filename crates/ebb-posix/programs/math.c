/* The C math functions natively are musl's: Rust's compiler_builtins
 * defines log, ceil and the rest for a soft-float ABI on
 * x86_64-unknown-none, and linked before musl they returned their
 * argument (apps/c-program/build.rs). Six decimals, the same under glibc
 * and musl. */
#include <math.h>
#include <stdio.h>

#include "report.h"

static int near(double got, double want)
{
	return fabs(got - want) < 1e-9;
}

int main(void)
{
	volatile double two = 2.0, x = 200.0;
	double bits = log(x) / log(two);
	printf("math: log(200)/log(2) = %.6f\n", bits);
	check("math", "log", near(bits, 7.643856189774724));
	check("math", "ceil", ceil(bits) == 8.0);
	check("math", "floor", floor(-1.5) == -2.0);
	check("math", "sqrt", near(sqrt(two), 1.4142135623730951));
	check("math", "pow", near(pow(two, 10.0), 1024.0));
	check("math", "exp", near(exp(1.0), 2.718281828459045));
	check("math", "sin", near(sin(1.0), 0.8414709848078965));
	check("math", "fmod", fmod(7.5, two) == 1.5);
	check("math", "logf", fabsf(logf(8.0f) / logf(2.0f) - 3.0f) < 1e-6f);
	return report_failures == 0 ? 0 : 1;
}
