from fintts.cli import main
from fintts.process_exit import exit_process

exit_process(main())
