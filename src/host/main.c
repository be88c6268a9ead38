/* placeholder until the host lands */
int main(void) { return 0; }
