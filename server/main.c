/* evald entry point (placeholder until the server layer lands). */
#include <stdio.h>

int main(void)
{
    puts("evald " EVALD_VERSION);
    return 0;
}
