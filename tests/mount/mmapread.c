/* mmapread FILE - write FILE's bytes to stdout, read through mmap(2). */
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct stat st;
	void *p;
	int fd;

	if (argc != 2 || (fd = open(argv[1], O_RDONLY)) < 0 || fstat(fd, &st) != 0) {
		perror(argc == 2 ? argv[1] : "usage: mmapread FILE");
		return 1;
	}
	if (st.st_size == 0)
		return 0;
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	return fwrite(p, 1, (size_t)st.st_size, stdout) == (size_t)st.st_size ? 0 : 1;
}
