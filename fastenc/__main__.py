from fastenc.cli import console_main

console_main()
